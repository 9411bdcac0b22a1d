"""The Store's readers: lookups, listings, recency, exact names and the link graph."""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from itertools import islice

from memstore import arguments as arg
from memstore._anchors import Anchors
from memstore._ascending import ascending
from memstore._linkers import ordered
from memstore._store_base import StoreBase
from memstore._tally import Tally
from memstore._updatekey import ts
from memstore.errors import InvalidItemError
from memstore.graph import (
    DEFAULT_CONTEXT_DECAY,
    DEFAULT_CONTEXT_DEPTH,
    Context,
    spread_within,
)
from memstore.item import (
    SCOPE_PRIVATE,
    Item,
    ScoredItem,
)
from memstore.limits import CONTEXT_REACH, SKIPPED_READS
from memstore.text import normalize_query

__all__ = ["RECENT_WINDOW", "StoreReads"]

RECENT_WINDOW = 500
"""How many of the most recently updated items :meth:`Store.recent` considers."""


class StoreReads(StoreBase):
    """Readers: every copy they return reports lazy staleness and passes the read seam."""

    def get(self, id: str) -> Item | None:
        """A copy of one item by id (through the ``read`` seam), or ``None``."""
        if type(id) is not str:  # 5 or ["a"] is no id: refused, not "not found"
            arg.id_arg(id)
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
        """The number of active items, private ones included.

        Counted by the store's tally (as :meth:`tally`: one walk at the first
        ask, then kept as items change), not by a walk over every item.
        """
        with self._locked():
            if self._tally is None:
                self._tally = Tally.of(self._items.values())
            return self._tally.active(self._now())

    def tally(self, partition: str) -> dict[tuple[str, str], int]:
        """How many of ``partition``'s items the store holds, by ``(kind, status)``.

        Private items are not counted; ``""`` counts the untagged ones. The
        status is the one readers are told: an active item past its
        ``stale_after`` counts as ``stale``. The first call walks the store
        once; from then on the counts are kept as items are written and
        removed, so a call costs what the partition's kinds cost, whatever
        the store's size (:class:`~memstore._tally.Tally`).

        >>> from memstore.item import Item
        >>> from memstore.store import Store
        >>> store = Store()
        >>> _ = store.upsert(Item(kind="fact", content="a", tags=["tenant/acme"]))
        >>> store.tally("acme")
        {('fact', 'active'): 1}
        """
        if type(partition) is not str:
            raise InvalidItemError(f"partition must be text, got {type(partition).__name__}")
        with self._locked():
            if self._tally is None:
                self._tally = Tally.of(self._items.values())
            return self._tally.counts(partition, self._now())

    def indexed(self, id: str) -> bool:
        """Whether ``id`` has entries in the lexical index."""
        if type(id) is not str:
            arg.id_arg(id)
        with self._locked():
            return id in self._lex

    def filtered(
        self,
        status: str = "",
        kind: str = "",
        scope: str = "",
        subject: str = "",
        confidence: str = "",
        limit: int = 0,
        skip: Callable[[Item], bool] | None = None,
    ) -> list[Item]:
        """Public items matching every non-empty filter, most recently updated first.

        ``subject`` matches the literal subject or a ``service/`` tag; ``status``
        is the effective one (an item past its deadline reads stale).
        ``limit <= 0`` means no limit. ``skip`` drops the items it is true of
        before they count towards ``limit`` (it sees the stored item: read it,
        never keep or change it), so a caller's own rule (a partition, say)
        costs no copy of the items it rejects.
        """
        return self.for_user("", status, kind, scope, subject, confidence, limit, skip)

    def for_user(
        self,
        user_hash: str,
        status: str = "",
        kind: str = "",
        scope: str = "",
        subject: str = "",
        confidence: str = "",
        limit: int = 0,
        skip: Callable[[Item], bool] | None = None,
    ) -> list[Item]:
        """:meth:`filtered` plus ``user_hash``'s own private items (and no one else's).

        The only reader that returns a private item, and only to its owner;
        an empty ``user_hash`` owns nothing. A filter or limit of the wrong type
        raises :class:`~memstore.errors.InvalidItemError` (``kind=None`` is not
        "any kind", ``limit=True`` is not 1).
        """
        _check_filters(
            user_hash=user_hash,
            status=status,
            kind=kind,
            scope=scope,
            subject=subject,
            confidence=confidence,
        )
        _check_limit(limit)
        _check_skip(skip)
        with self._locked():
            now = self._now()
            own = self._private.get(user_hash, set()) if user_hash else set()
            out: list[Item] = []
            for it in reversed(self._by_update):
                if it.scope == SCOPE_PRIVATE and it.id not in own:
                    continue
                if not self._matches(it, now, status, kind, scope, subject, confidence):
                    continue
                if skip is not None and skip(it):
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
        :data:`RECENT_WINDOW` (or ``limit``, if more) most recently updated
        matches are sorted; ``skip`` drops items the caller treats as expired.
        """
        _check_filters(kind=kind, scope=scope, subject=subject)
        _check_limit(limit)
        _check_skip(skip)
        with self._locked():
            now = self._now()
            window: list[Item] = []
            cap = max(RECENT_WINDOW, limit)  # a limit past the window is given in full
            for it in reversed(self._by_update):
                if it.scope == SCOPE_PRIVATE or not it.is_active(now):
                    continue
                if not self._matches(it, now, "", kind, scope, subject, ""):
                    continue
                if skip is not None and skip(it):
                    continue
                window.append(it)
                if len(window) >= cap:
                    break
            window.sort(key=lambda it: (ts(it.created_at), ts(it.updated_at), it.id), reverse=True)
            return self._out([it.clone() for it in window[: max(limit, 0) or len(window)]])

    def exact_matches(self, query: str, kind: str = "", subject: str = "") -> list[Item]:
        """Active public items whose whole title, or ``service/`` tag value, equals ``query``.

        Both sides normalised: what a caller who typed a name means. Newest first.
        Writes only queue their ids for the exact-title index; the first lookup
        after them normalises those titles and enters them (once each).
        """
        _check_filters(query=query, kind=kind, subject=subject)
        key = normalize_query(query)
        if not key:
            return []
        with self._locked():
            now = self._now()
            self._exact_catch_up()
            found = [self._items[i] for i in self._exact.get(key, ())]
            found = [
                it
                for it in found
                if it.is_active(now) and self._matches(it, now, "", kind, "", subject, "")
            ]
            found.sort(key=lambda it: (ts(it.updated_at), it.id), reverse=True)
            return self._out([it.clone() for it in found])

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
        check an owner against). ``max_depth`` outside 1..8 means 8. Every item
        the anchors reach is walked and copied: :meth:`traverse_within` bounds it.
        """
        return self.traverse_within(anchor_ids, max_depth, decay)[0]

    def traverse_within(
        self,
        anchor_ids: Sequence[str],
        max_depth: int = 3,
        decay: float = DEFAULT_CONTEXT_DECAY,
        *,
        reach: int = 0,
        keep: Callable[[Item], bool] | None = None,
        limit: int = 0,
        through: Callable[[Item], bool] | None = None,
    ) -> tuple[list[ScoredItem], bool]:
        """:meth:`traverse_scored` reaching at most ``reach`` items (``0``: every one), and
        whether that was all of them.

        While the walk reaches at most ``reach`` items the answer is
        :meth:`traverse_scored`'s and the flag is ``True``; one more and it
        stops, answering the ``reach`` items it reached (each scored by the
        best path found so far) and ``False``
        (:func:`~memstore.graph.spread_within`). Only those items are copied,
        so a click on a hub costs ``reach`` items, not its whole neighbourhood.
        A caller that shows a few of them says which: ``keep`` (it sees the
        stored item: read it, never keep or change it) drops those it is false
        of, and only the first ``limit`` kept (``0``: every one) are copied and
        answered, best first as ever. The walk is the same; the flag too.

        ``through`` (it sees the stored item too) is what the walk may pass
        through at all: a caller answering for one tenant walks that tenant's
        items only, so what other partitions hold neither lifts a score nor
        stops the walk (an anchor it is false of is no anchor). The answer is
        then the walk of a store holding only those items. A neighbour it
        refuses was still read: once more than :data:`~memstore.limits.SKIPPED_READS`
        times ``reach`` have been refused, the walk stops there and the flag is
        ``False`` (a hub linked from many other partitions' items costs the
        bound, not its links).

        >>> from memstore.item import Item, ThoughtLink
        >>> from memstore.store import Store
        >>> store = Store()
        >>> _ = store.upsert(Item(id="hub", kind="note", content="hub"))
        >>> for n in range(3):
        ...     _ = store.upsert(Item(id=f"s{n}", kind="note", content="spoke",
        ...                           links=[ThoughtLink(to_id="hub", relation="explains")]))
        >>> found, complete = store.traverse_within(["hub"], reach=2)
        >>> [s.item.id for s in found], complete
        (['s0', 's1'], False)
        """
        _check_ids(anchor_ids, "anchor_ids")
        _check_limit(max_depth, "max_depth")
        if isinstance(decay, bool) or not isinstance(decay, int | float) or not 0.0 < decay <= 1.0:
            raise InvalidItemError(f"decay must be in (0, 1], got {decay!r}")
        reach = arg.count(reach, "reach", 0)
        limit = arg.count(limit, "limit", 0)
        for name, fn in (("keep", keep), ("through", through)):
            if fn is not None and not callable(fn):
                raise InvalidItemError(f"{name} must be a function or None, got {arg.describe(fn)}")
        with self._locked():
            now = self._now()
            items = self._items
            refused = 0  # neighbours read that ``through`` refused
            budget = SKIPPED_READS * reach

            def passes(id: str) -> bool:
                """Whether the walk may step on ``id`` (traversable, and ``through`` of it)."""
                nonlocal refused
                if not self._traversable(id, now):
                    return False
                if through is None or through(items[id]):
                    return True
                refused += 1
                return False

            anchors = [a for a in dict.fromkeys(anchor_ids) if passes(a)]
            refused = 0  # the caller named those: they cost no walk
            backlinks, orders = self._backlinks, self._linker_order

            def linkers(node: str) -> Iterable[str]:
                """In id order, so where a bounded walk stops is deterministic; bounded,
                only the first few of a hub's are ever read, so none is sorted here."""
                if reach:
                    return ordered(backlinks, orders, node)
                return sorted(backlinks.get(node, ()))

            def neighbours(node: str) -> Iterator[tuple[str, float]]:
                for link in items[node].links:
                    if budget and refused > budget:
                        return
                    if passes(link.to_id):
                        yield link.to_id, link.weight
                for src in linkers(node):
                    if budget and refused > budget:
                        return
                    if passes(src):
                        for link in items[src].links:
                            if link.to_id == node:
                                yield src, link.weight

            walk = spread_within(anchors, neighbours, max_depth, decay, reach)
            complete = walk.complete and not (budget and refused > budget)
            ranked: Iterable[tuple[str, float]] = walk.ranked
            if keep is not None:
                ranked = ((id, s) for id, s in ranked if keep(items[id]))
            if limit:  # islice takes at most sys.maxsize; no walk answers more
                ranked = islice(ranked, min(limit, sys.maxsize))
            out = [ScoredItem(item=self._view(items[id], now), score=s) for id, s in ranked]
            self._out([s.item for s in out])
            return out, complete

    def neighbours(
        self, ids: Iterable[str], relations: Collection[str], *, reach: int = 0
    ) -> dict[str, list[tuple[str, float]]]:
        """One hop along links of ``relations``, both ways: ``id -> [(other, weight), ...]``.

        A link is an association, so ``a -> b`` makes each the other's
        neighbour (as in :meth:`traverse_scored`). Only shared, active items
        take part, on both ends; an id with no such neighbour is left out. No
        item is copied or read through the ``read`` seam: this is the graph
        alone, for a caller scoring many candidates (the searcher's spreading).
        Cost: O(links of the ids).

        An id's own links are few; the items linking to it (its linkers) may
        be a hundred thousand. ``reach`` (``0``: no bound) bounds how many
        linkers are read in all, counting each of them whatever its relation
        or state: the ids are taken in the order given, each reads all its
        linkers while the count stays within ``reach``; the first that would
        pass it reads its first linkers by id up to ``reach``, and the ids
        after it read none (their own links still count). Under the bound the
        answer is the unbounded one. The first linkers of a hub come from the
        order the store keeps for it (:mod:`memstore._linkers`): O(reach + log n),
        not a sort or a copy of its ``n``.

        >>> from memstore.item import Item, ThoughtLink
        >>> from memstore.store import Store
        >>> store = Store()
        >>> for id in ("hub", "other"):
        ...     _ = store.upsert(Item(id=id, kind="note", content=id))
        >>> for n in range(3):
        ...     _ = store.upsert(Item(id=f"s{n}", kind="note", content="spoke", links=[
        ...         ThoughtLink(to_id="hub", relation="explains"),
        ...         ThoughtLink(to_id="other", relation="explains")]))
        >>> found = store.neighbours(["hub", "other"], ["explains"], reach=4)
        >>> sorted(o for o, _ in found["hub"]), [o for o, _ in found["other"]]
        (['s0', 's1', 's2'], ['s0'])
        """
        _check_ids(ids, "ids")
        _check_ids(relations, "relations")
        reach = arg.count(reach, "reach", 0)
        wanted = frozenset(relations)
        out: dict[str, list[tuple[str, float]]] = {}
        if not wanted:
            return out
        with self._locked():
            now = self._now()
            items, backlinks, orders = self._items, self._backlinks, self._linker_order
            left = reach  # linkers still to be read, when bounded

            def live(id: str) -> Item | None:  # _traversable, returning the item
                it = items.get(id)
                if it is None or it.scope == SCOPE_PRIVATE or not it.is_active(now):
                    return None
                return it

            for id in ids:
                it = live(id)
                if it is None:
                    continue
                found = [
                    (link.to_id, link.weight)
                    for link in it.links
                    if link.relation in wanted and live(link.to_id) is not None
                ]
                linkers: Iterable[str] = backlinks.get(id, ())
                if reach:
                    n = len(backlinks.get(id, ()))
                    if n > left:  # the first ``left`` by id, kept in order for a hub
                        linkers, n = islice(ordered(backlinks, orders, id), left), left
                    left -= n
                for src in linkers:
                    other = live(src)
                    if other is not None:
                        found.extend(
                            (src, link.weight)
                            for link in other.links
                            if link.to_id == id and link.relation in wanted
                        )
                if found:
                    out[id] = found
        return out

    def linking_to(self, id: str) -> list[Item]:
        """The links in: copies of the shared, active items holding a link to ``id``, by id.

        Answered from the reverse-link index the store keeps up to date on
        every write, so its cost is the number of such items, never the size
        of the store. ``id`` need not be held (an item may link to one deleted
        since). Private and inactive items are left out, as
        :meth:`traverse_scored` leaves them out.
        """
        if type(id) is not str:
            arg.id_arg(id)
        with self._locked():
            now = self._now()
            ids = sorted(self._backlinks.get(id, ()))
            return self._out(
                [self._view(self._items[i], now) for i in ids if self._traversable(i, now)]
            )

    def links_in(
        self, id: str, *, skip: Callable[[Item], bool] | None = None, limit: int = 0
    ) -> tuple[list[Item], int]:
        """:meth:`linking_to`, bounded: the first ``limit`` linking items, and every link counted.

        Copies of the first ``limit`` (``0``: every one) shared, active items
        holding a link to ``id``, by id, and how many links to ``id`` all of
        them hold (an item may hold several). ``skip`` drops the items it is
        true of before they are kept or counted (it sees the stored item: read
        it, never keep or change it). Only the items returned are copied, and
        only the first ``limit`` ids are put in order
        (:func:`~memstore._ascending.ascending`), so an item ten thousand others
        link to costs ten thousand checks, not copies nor a sort.

        >>> from memstore.item import Item, ThoughtLink
        >>> from memstore.store import Store
        >>> store = Store()
        >>> _ = store.upsert(Item(id="hub", kind="note", content="hub"))
        >>> for n in range(3):
        ...     _ = store.upsert(Item(id=f"s{n}", kind="note", content="spoke",
        ...                           links=[ThoughtLink(to_id="hub", relation="explains")]))
        >>> kept, links = store.links_in("hub", limit=2)
        >>> [it.id for it in kept], links
        (['s0', 's1'], 3)
        """
        if type(id) is not str:
            arg.id_arg(id)
        limit = arg.count(limit, "limit", 0, 2**63 - 1)
        _check_skip(skip)
        with self._locked():
            now = self._now()
            linkers: list[str] = []
            links = 0
            for i in self._backlinks.get(id, ()):  # every one is counted: in any order
                if not self._traversable(i, now):
                    continue
                it = self._items[i]
                if skip is not None and skip(it):
                    continue
                links += sum(1 for link in it.links if link.to_id == id)
                linkers.append(i)
            kept = islice(ascending(linkers), limit) if limit else sorted(linkers)
            return self._out([self._view(self._items[i], now) for i in kept]), links

    def linker_ids(self, id: str) -> list[str]:
        """The ids of every item holding a link to ``id`` now, whatever its status or scope.

        Ids only (no content, so no private text): for a caller that reads
        those items' past states itself (the inspector's view of a moment).
        O(number of such items).
        """
        if type(id) is not str:
            arg.id_arg(id)
        with self._locked():
            return sorted(self._backlinks.get(id, ()))

    def traverse(
        self, anchor_ids: Sequence[str], max_depth: int = 3, decay: float = DEFAULT_CONTEXT_DECAY
    ) -> list[Item]:
        """:meth:`traverse_scored` without the scores."""
        return [s.item for s in self.traverse_scored(anchor_ids, max_depth, decay)]

    def resolve_anchors(self, anchor: str) -> list[str]:
        """Map an anchor string to ids of shared, active items, in id order.

        An exact id first (case-insensitively); failing that, every item whose
        subject is the anchor (case-insensitively); failing that, every item
        whose subject or title contains it. Private items never resolve.
        Answered from an index the store builds at the first call and keeps
        as items change (:class:`~memstore._anchors.Anchors`): the first two
        are a dict lookup each, the last one pass over the distinct subjects
        and titles; none reads every item.
        """
        _check_filters(anchor=anchor)
        needle = anchor.strip().casefold()
        if not needle:
            return []
        with self._locked():
            now = self._now()
            items = self._items
            if self._anchors is None:
                self._anchors = Anchors.of(items.values())
            anchors = self._anchors
            for lookup in (anchors.by_id, anchors.by_subject, anchors.containing):
                ids = sorted(id for id in lookup(needle) if items[id].is_active(now))
                if ids:
                    return ids
            return []

    def context(
        self, anchor: str, max_depth: int = DEFAULT_CONTEXT_DEPTH, *, reach: int = CONTEXT_REACH
    ) -> tuple[list[Item], list[ScoredItem]]:
        """What an anchor activates: the anchor items, and what spreads from them.

        Each hop multiplies by 0.6 and the link's weight; ``max_depth`` hops at
        most (default 3, at most 8). Only shared, active items take part. At
        most ``reach`` anchors and ``reach`` items reached (``0``: every one):
        :meth:`context_within` says whether the read stopped there.
        """
        found = self.context_within(anchor, max_depth, reach=reach)
        return found.anchors, found.related

    def context_within(
        self, anchor: str, max_depth: int = DEFAULT_CONTEXT_DEPTH, *, reach: int = CONTEXT_REACH
    ) -> Context:
        """:meth:`context`, and whether it is the whole answer.

        The anchor names items as :meth:`resolve_anchors` finds them; past
        ``reach`` of them the first ``reach`` (by id) are kept. The walk from
        them stops once it would reach more than ``reach`` items
        (:meth:`traverse_within`). Either way ``complete`` is ``False``; when
        neither happens the answer is the unbounded one and ``complete`` is
        ``True``. ``reach=0`` never stops.
        """
        _check_limit(max_depth, "max_depth")
        reach = arg.count(reach, "reach", 0)
        ids = self.resolve_anchors(anchor)
        if max_depth <= 0:
            max_depth = DEFAULT_CONTEXT_DEPTH
        with self._locked():
            now = self._now()
            # An anchor deleted (or retired) since it was resolved is no anchor now.
            ids = [i for i in ids if self._traversable(i, now)]
            named_all = not reach or len(ids) <= reach
            ids = ids if named_all else ids[:reach]
            anchors = self._out([self._view(self._items[i], now) for i in ids])
        related, reached_all = self.traverse_within(
            ids, max_depth, DEFAULT_CONTEXT_DECAY, reach=reach
        )
        return Context(anchors, related, named_all and reached_all)


def _check_filters(**filters: object) -> None:
    """Refuse a filter that is not text (``None`` or ``5`` would match nothing, or everything)."""
    for name, value in filters.items():
        if type(value) is not str and not isinstance(value, str):
            raise InvalidItemError(f"{name} must be text, got {arg.describe(value)}")


def _check_limit(value: object, name: str = "limit") -> None:
    """Refuse a count that is not a whole number (its value keeps its documented meaning)."""
    if type(value) is not int and (
        isinstance(value, bool) or not hasattr(type(value), "__index__")
    ):
        raise InvalidItemError(f"{name} must be a whole number, got {arg.describe(value)}")


def _check_skip(skip: object) -> None:
    """Refuse a ``skip`` rule that cannot be called."""
    if skip is not None and not callable(skip):
        raise InvalidItemError(f"skip must be a function or None, got {arg.describe(skip)}")


def _check_ids(value: object, name: str) -> None:
    """Refuse one string (its letters are not ids), a mapping (nor its keys), a non-iterable."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise InvalidItemError(f"{name} must be a list, got {arg.describe(value)}")
