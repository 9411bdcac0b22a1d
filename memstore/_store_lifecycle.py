"""The store's lifecycle transitions: delete, expire, retire, refute, link and prune.

Writes that move stored items along their lifecycle rather than accept new
ones: a stale or superseded item is a retired *copy* of the stored one
(:meth:`StoreLifecycle._retire`), a refutation expires what cites the cell,
a link is added under the model's cap, and the pruning calls garbage-collect
a read model. They take the store's lock and write through
:meth:`~memstore._store_base.StoreBase._write`, as every write does.
:class:`~memstore.store.Store` inherits them.
"""

from __future__ import annotations

import base64
import datetime as _dt
from collections.abc import Collection, Mapping, Sequence

from memstore import arguments as arg
from memstore._store_base import StoreBase
from memstore.errors import InvalidItemError, MemstoreError
from memstore.item import (
    MAX_MODEL_LINKS,
    ORIGIN_DERIVED,
    REFUTED_DATA_KEY,
    STATUS_ACTIVE,
    STATUS_STALE,
    STATUS_SUPERSEDED,
    Item,
    RefutedRecord,
    ThoughtLink,
)
from memstore.limits import (
    MAX_DATA_CHARS,
    MAX_DATA_KEYS,
    MAX_REASON_CHARS,
    MAX_REF_CHARS,
    MAX_REFS,
)
from memstore.tags import restored_origin
from memstore.validate import link_shape_rejection, thought_link_rejection

__all__ = ["StoreLifecycle"]


class StoreLifecycle(StoreBase):
    """Deleting, retiring, refuting, linking and pruning stored items."""

    def delete(self, id: str) -> bool:
        """Remove one item by id; returns whether it existed."""
        if type(id) is not str:  # 5 or ["a"] is no id: refused, not "did not exist"
            arg.id_arg(id)
        with self._writing():
            if id not in self._items:
                return False
            self._write(id, None)
            return True

    def _retire(self, item: Item, status: str, **update: object) -> Item:
        return item.clone(status=status, updated_at=self._now(), **update)

    def expire(self, id: str) -> bool:
        """Mark an item stale, whatever its status; returns whether it exists.

        As the Go package's ``Expire``: a superseded item becomes stale too (its
        successor's ``supersedes`` still records it, so the chain keeps it), and
        :meth:`refute`, which expires through the same step, leaves a refuted
        superseded item stale. An item already stale is left as it is.
        """
        if type(id) is not str:
            arg.id_arg(id)
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

    def mark_superseded(self, id: str, by_id: str) -> bool:
        """Retire ``id`` as superseded by the existing cell ``by_id``, in place.

        The keeper's ``supersedes`` records ``id``, keeping only the most
        recent :data:`~memstore.limits.MAX_REFS` entries (the oldest drop off,
        their cells stay superseded), so a keeper that absorbs many
        restatements can still be updated and re-imported. Returns ``False``,
        writing nothing, when either id is empty or unknown, they are equal,
        the keeper is not active (retiring a cell into a retired one would
        leave neither current), or another active cell already supersedes
        ``id`` (a chain never forks into two current versions).
        """
        if type(id) is not str or type(by_id) is not str:
            arg.id_arg(id)
            arg.id_arg(by_id, "by_id")
        if not id or not by_id or id == by_id:
            return False
        with self._writing():
            old, keeper = self._items.get(id), self._items.get(by_id)
            if old is None or keeper is None or not keeper.is_active(self._now()):
                return False
            if self._claimant_locked(id, by_id) is not None:
                return False
            self._write(id, self._retire(old, STATUS_SUPERSEDED))
            if id not in keeper.supersedes:
                supersedes = [*keeper.supersedes, id][-MAX_REFS:]
                self._write(by_id, keeper.clone(supersedes=supersedes, updated_at=self._now()))
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
        a link to it). Observed, human and verified cells are never cascaded
        (an unset origin reads as :func:`~memstore.tags.restored_origin` says:
        human with an ``author/`` tag, else derived).
        Returns whether the cell existed and the ids expired as a consequence.
        The record's ``at`` is ``now`` (default: the store's clock) in UTC; a
        naive ``now``, or a record that would take the cell's data past
        :data:`~memstore.limits.MAX_DATA_CHARS` or
        :data:`~memstore.limits.MAX_DATA_KEYS`, raises
        :class:`~memstore.errors.InvalidItemError` and changes nothing, as
        does an argument of the wrong type (``evidence="cell-1"`` is one
        reference, not a list of its letters: pass ``["cell-1"]``).
        """
        id = arg.id_arg(id)
        reason = arg.text_arg(reason, "reason", MAX_REASON_CHARS)
        evidence = arg.text_list(evidence, "evidence", MAX_REFS, MAX_REF_CHARS)
        if now is not None and (not isinstance(now, _dt.datetime) or now.tzinfo is None):
            raise InvalidItemError(
                f"now must be an aware datetime or None, got {arg.describe(now)}"
            )
        when = now or self._now()
        if when.utcoffset() is None:  # "at" is RFC 3339 in UTC: a naive time names no instant
            raise InvalidItemError(f"refute needs a timezone-aware time, got {when!r}")
        at = when.astimezone(_dt.UTC).isoformat().replace("+00:00", "Z")
        record = RefutedRecord(reason=reason, evidence=list(evidence), at=at)
        encoded = base64.b64encode(record.model_dump_json().encode()).decode()
        with self._writing():
            item = self._items.get(id)
            if item is None:
                return False, []
            data = {**item.data, REFUTED_DATA_KEY: encoded}
            # Past a data bound the item could never be updated or imported again.
            if len(data) > MAX_DATA_KEYS:
                raise InvalidItemError(
                    f"the refutation of {id} would give its data {len(data)} keys; at most "
                    f"{MAX_DATA_KEYS}: remove a key of its data (mutate or update) first"
                )
            size = sum(len(k) + len(v) for k, v in data.items())
            if size > MAX_DATA_CHARS:
                raise InvalidItemError(
                    f"the refutation of {id} would make its data hold {size} characters; "
                    f"at most {MAX_DATA_CHARS}: give a shorter reason or less evidence"
                )
            self._write(id, self._retire(item, STATUS_STALE, data=data))
            cascaded: list[str] = []
            citing = self._citations.get(id, set()) | self._backlinks.get(id, set())
            current = self._now()  # the store's clock (``now`` dates the record)
            for cid in sorted(citing):
                cell = self._items.get(cid)
                # One already past its deadline is stale by now: not expired *by* this.
                if cell is None or cid == id or not cell.is_active(current):
                    continue
                # The origin the cell reads back with: a cell stored as given
                # (put, restore) with no origin but an author tag is a person's.
                if restored_origin(cell) != ORIGIN_DERIVED:
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
        A link-only edit is not published to the change hook. A ``link`` that
        is not a :class:`~memstore.item.ThoughtLink`, or one whose fields were
        assigned values the model refuses (a weight of NaN, infinity or
        outside ``(0, 1]``, a target that is not text:
        :func:`~memstore.validate.link_shape_rejection`), raises
        :class:`~memstore.errors.InvalidItemError` and changes nothing: the
        journal could not read the cell back.
        """
        from_id = arg.id_arg(from_id, "from_id")
        if not isinstance(link, ThoughtLink):
            raise InvalidItemError(f"link must be a ThoughtLink, got {arg.describe(link)}")
        why = link_shape_rejection(link)
        if why:
            raise InvalidItemError(f"link from {from_id}: {why}; nothing was written")
        # The caller's object stays theirs; a weight given as an int is stored as the float.
        link = ThoughtLink(to_id=link.to_id, relation=link.relation, weight=float(link.weight))
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
        ``keep`` is a collection of ids: one bare string is refused (``in``
        would test it as text, keeping every id that is part of it), and so is
        a mapping (its keys would be taken for the ids, whatever it maps).

        A store with a journal attached (a commit hook) refuses: the journal
        is then the record, it would still hold what was pruned, and the
        next open would bring it back. Delete or purge through the journal.
        """
        if isinstance(keep, str | bytes | Mapping) or not isinstance(keep, Collection):
            raise InvalidItemError(f"keep must be a collection of ids, got {arg.describe(keep)}")
        with self._locked():
            if self._txn is not None:
                raise MemstoreError("prune_except cannot run inside a batch")
            if self._commit_hook is not None:
                raise MemstoreError(
                    "prune_except is for a store whose record is kept elsewhere; this one has "
                    "a journal, which would still hold the pruned items: delete or purge them"
                )
            gone = [
                id
                for id, it in self._items.items()
                if id not in keep and (it.cell_originated or it.status != STATUS_ACTIVE)
            ]
            for id in gone:
                self._set(id, None)
            return len(gone)
