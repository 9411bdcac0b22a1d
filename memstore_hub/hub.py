"""The hub: publish memory events, fan them out to subscribers by topic and partition.

>>> hub = Hub()
>>> sub = hub.subscribe(topics={"hit"}, partition="alpha")
>>> _ = hub.publish_hit(["n1"], "ledger pool", partition="alpha")
>>> _ = hub.publish_hit(["n2"], "tax filing", partition="beta")
>>> event = sub.get_nowait()
>>> event.item_ids, event.query, event.seq
(('n1',), 'ledger pool', 1)
>>> sub.get_nowait() is None
True

Publishing is cheap and never waits for a subscriber: one short lock (the
sequence number, the replay buffer and the fan-out stay in one order for
everyone), then an append to each receiving subscriber's bounded queue. A
subscriber that does not keep up loses its oldest events, and is told.
"""

from __future__ import annotations

import itertools
import sys
import threading
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from ulid import ULID

from memstore.errors import MemstoreError
from memstore.item import SCOPE_PRIVATE, Item
from memstore.store import Store
from memstore_hub._bridge import StoreBridge
from memstore_hub.events import TOPICS, Event, ItemChanged, MetricsSnapshot, SearchHit
from memstore_hub.partition import item_partition, reaches, subscriber_partition
from memstore_hub.subscription import GAP_EXPIRED, GAP_UNKNOWN, Subscription

if TYPE_CHECKING:
    from memstore.config import Change

__all__ = [
    "DEFAULT_MAXSIZE",
    "DEFAULT_REPLAY",
    "Hub",
    "HubClosedError",
    "HubStats",
    "SubscriberStats",
]

DEFAULT_MAXSIZE = 1000
"""Unread events a subscriber keeps before the oldest is dropped."""
DEFAULT_REPLAY = 1000
"""Recent events the hub keeps for subscribers that resume (``subscribe(after=...)``)."""

E = TypeVar("E", bound=Event)
_Ref = weakref.ReferenceType[Subscription]
_Route = tuple[_Ref, ...]
_RouteKey = tuple[str, str | None, str | None]  # topic, audience, the audience spared


class HubClosedError(MemstoreError, RuntimeError):
    """The hub was closed: it takes no new subscriber."""


@dataclass(frozen=True, slots=True)
class SubscriberStats:
    """One subscriber's counters (a snapshot)."""

    id: int
    name: str
    partition: str | None
    topics: tuple[str, ...] | None
    maxsize: int
    received: int
    """Events pushed to it (read, queued or dropped)."""
    read: int
    """Events it has read."""
    queued: int
    """Events waiting in its queue."""
    dropped: int
    """Events it lost because its queue was full."""


@dataclass(frozen=True, slots=True)
class HubStats:
    """What :meth:`Hub.stats` reports."""

    subscribers: int
    """Open subscriptions."""
    published: int
    """Events published since the hub was created (the last sequence number)."""
    replay_buffered: int
    """Events held for resumption."""
    per_subscriber: tuple[SubscriberStats, ...]

    @property
    def dropped(self) -> int:
        """Events lost, summed over the open subscriptions."""
        return sum(s.dropped for s in self.per_subscriber)


def _check_partition(partition: object) -> None:
    """Refuse a partition that is neither a string nor ``None`` (it would reach no one)."""
    if partition is not None and type(partition) is not str:
        raise ValueError(f"partition must be a string or None, got {partition!r:.60}")


class Hub:
    """Publish/subscribe of memory events, safe from any thread and into any event loop.

    ``replay`` recent events are kept so that a subscriber that reconnects can
    resume where it left off (``0`` keeps none). ``epoch`` names this hub
    instance in resumable ids (default: a fresh ULID; no line break or NUL,
    which an SSE id cannot hold), so that an id from a previous process is
    recognised as unknown rather than misread.

    An argument of the wrong type (``replay="10"``, ``publish_hit("id", q)``,
    ``attach("store")``) raises :class:`ValueError` naming it, before anything
    is published or installed.
    """

    def __init__(self, *, replay: int = DEFAULT_REPLAY, epoch: str | None = None) -> None:
        if type(replay) is not int or not 0 <= replay <= sys.maxsize:
            raise ValueError(f"replay must be a whole number >= 0, got {replay!r}")
        if epoch is not None and (type(epoch) is not str or not epoch):
            raise ValueError(f"epoch must be a non-empty string or None, got {epoch!r}")
        if epoch is not None and any(c in epoch for c in "\r\n\0"):
            # It starts every SSE id: a line break would split the frame, a NUL
            # makes a client ignore the id (and so lose its resume position).
            raise ValueError(f"epoch cannot hold a line break or NUL (an SSE id), got {epoch!r}")
        self.epoch = epoch if epoch is not None else str(ULID())
        """This hub instance's name in resumable event ids."""
        self._lock = threading.Lock()
        self._seq = 0
        self._replay: deque[Event] = deque(maxlen=replay)
        # Weak: a subscription nobody references any more (``for e in
        # hub.subscribe(): break``) can never be read; it is freed, queue and
        # all, and the hub forgets it at the next publish (see _reap_locked).
        # A coroutine waiting in aget() keeps its subscription in _keep.
        self._subs: dict[int, _Ref] = {}
        self._keep: set[Subscription] = set()
        self._freed = False  # set by a weakref callback: a subscription was freed
        # (topic, audience) -> the subscriptions receiving it, rebuilt lazily
        # after a subscribe or unsubscribe: a publish does one dict lookup.
        self._routes: dict[_RouteKey, _Route] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self._bridges: dict[int, Callable[[], None]] = {}

    def __repr__(self) -> str:
        return f"Hub(epoch={self.epoch!r}, published={self._seq}, subscribers={len(self._subs)})"

    # ------------------------------------------------------------ publishing

    def publish(self, event: E) -> E:
        """Stamp ``event`` with the next sequence number and deliver it; returns it.

        Every subscriber whose topics and partition take the event gets it, in
        the same order as every other event. Never blocks on a subscriber and
        never raises because of one. After :meth:`close` nothing is delivered
        (the event keeps ``seq == 0``). An event object is published once.
        """
        if not isinstance(event, Event):
            raise ValueError(f"publish takes an event (memstore_hub.events), got {event!r:.60}")
        if event.seq:
            raise ValueError(f"event already published (seq {event.seq}): {event!r}")
        return self._publish(event)

    def _publish(self, event: E, *, spared: str | None = None) -> E:
        """:meth:`publish`, sparing the subscribers of ``spared`` (see ``partition.reaches``)."""
        with self._lock:
            if self._closed:
                return event
            seq = self._seq + 1
            self._seq = seq
            object.__setattr__(event, "seq", seq)  # frozen for readers; the hub stamps it
            object.__setattr__(event, "spared", spared)
            self._replay.append(event)
            key = _route_key(event)
            route = self._routes.get(key)
            if route is None:
                route = self._route_locked(key)
            for ref in route:
                sub = ref()
                if sub is not None and not sub._push(event):
                    self._remove_locked(sub)
            if self._freed:
                self._reap_locked()
        return event

    def publish_change(
        self,
        op: Literal["upsert", "delete"],
        item: Item | None = None,
        id: str = "",
        kind: str = "",
        *,
        previous: Item | None = None,
        lsn: object | None = None,
    ) -> ItemChanged | None:
        """Publish an item change; the event, or ``None`` when it may not be published.

        An upsert carries the stored ``item``; a delete carries none, and its
        ``previous`` (the item removed) tells whose partition it was: without
        it the delete goes to subscribers of every partition only. A private
        item (the upserted one, or the deleted ``previous``) is never published.
        ``lsn`` is the change's place in a journal, when one is known (any
        JSON-encodable value).

        An upsert's ``previous`` (the item it replaced) tells who saw the item
        until now: when the upsert takes it out of their sight (moved to
        another partition, unshared, made private), they first get a
        ``delete`` marked :attr:`~memstore_hub.events.ItemChanged.withdrawn`,
        carrying no item, and those who see the new state get the upsert.
        Returned: the upsert, or the withdrawal when the item is now private.
        """
        if item is not None and not isinstance(item, Item):
            raise ValueError(f"item must be an Item or None, got {item!r:.60}")
        if previous is not None and not isinstance(previous, Item):
            raise ValueError(f"previous must be an Item or None, got {previous!r:.60}")
        if type(id) is not str or type(kind) is not str:
            raise ValueError(f"id and kind must be strings, got {id!r:.40} and {kind!r:.40}")
        if op == "upsert":
            if item is None:
                raise ValueError("an upsert change carries the stored item")
            return self._publish_upsert(item, id or item.id, kind or item.kind, previous, lsn)
        if op != "delete":
            raise ValueError(f"op must be 'upsert' or 'delete', got {op!r}")
        if item is not None:
            raise ValueError("a delete change carries no item; pass the removed one as previous")
        if previous is None:
            audience: str | None = None
        elif previous.scope == SCOPE_PRIVATE:
            return None
        else:
            audience = item_partition(previous)
        return self.publish(ItemChanged(op=op, id=id, kind=kind, lsn=lsn, partition=audience))

    def _publish_upsert(
        self, item: Item, id: str, kind: str, previous: Item | None, lsn: object | None
    ) -> ItemChanged | None:
        """The upsert of ``item``, after withdrawing it from those who lose sight of it."""
        now, was = _seen_by(item), _seen_by(previous)
        withdrawal: ItemChanged | None = None
        if previous is not None and was is not None and was != now:
            gone = ItemChanged(
                op="delete", id=id, kind=previous.kind, lsn=lsn, partition=was, withdrawn=True
            )
            withdrawal = self._publish(gone, spared=now)  # not those who still see it
        if now is None:
            return withdrawal
        return self.publish(
            ItemChanged(op="upsert", id=id, kind=kind, item=item, lsn=lsn, partition=now)
        )

    def publish_hit(
        self,
        item_ids: Sequence[str],
        query: str,
        kind: str = "",
        kinds: Sequence[str] | None = None,
        *,
        partition: str | None = None,
    ) -> SearchHit | None:
        """Publish that a search surfaced ``item_ids`` to a consumer.

        ``partition`` is the searcher's (``None``: subscribers of every
        partition only). The caller vouches that the ids are fit for that
        audience (:meth:`attach` drops private items). An empty hit is not an
        event (``None``); ``kinds`` of the wrong length is dropped.
        """
        if isinstance(item_ids, str | bytes | Mapping) or not isinstance(item_ids, Iterable):
            raise ValueError(f"item_ids must be a list of ids, got {item_ids!r:.60}")
        if kinds is not None and (isinstance(kinds, str | bytes) or not isinstance(kinds, Sized)):
            raise ValueError(f"kinds must be a list of kinds or None, got {kinds!r:.60}")
        if type(query) is not str or type(kind) is not str:
            raise ValueError(f"query and kind must be strings, got {query!r:.40} and {kind!r:.40}")
        _check_partition(partition)
        if not item_ids:
            return None
        ids = tuple(item_ids)
        kinds_t = tuple(kinds) if kinds is not None and len(kinds) == len(ids) else None
        return self.publish(
            SearchHit(item_ids=ids, query=query, kind=kind, kinds=kinds_t, partition=partition)
        )

    def publish_metrics(
        self, values: Mapping[str, float], *, partition: str | None = None
    ) -> MetricsSnapshot:
        """Publish a snapshot of ``values`` (copied); by default to subscribers of
        every partition only, as metrics describe the whole engine."""
        if not isinstance(values, Mapping):
            raise ValueError(f"values must be a mapping of names to numbers, got {values!r:.60}")
        _check_partition(partition)
        return self.publish(MetricsSnapshot(values=dict(values), partition=partition))

    # ----------------------------------------------------------- subscribing

    def subscribe(
        self,
        *,
        topics: Collection[str] | None = None,
        partition: str | None = None,
        maxsize: int = DEFAULT_MAXSIZE,
        after: int | None = None,
        name: str = "",
        shared: bool = True,
    ) -> Subscription:
        """A new subscription to the events published from now on.

        ``topics``: a subset of :data:`~memstore_hub.events.TOPICS` (``None``:
        all). ``partition``: the partition whose events it receives, plus those
        every partition sees (``None`` or ``"*"``: every event). ``maxsize``:
        unread events kept before the oldest is dropped. ``shared=False``: a
        partition's subscriber receives only that partition's own events, not
        those every partition sees (untagged and ``shared`` items, hits
        addressed to everyone): for a tenant's stream that must show nothing
        it does not own.

        ``after``: resume after the event with this sequence number: the
        matching events published since are queued first from the replay
        buffer, then the live ones, with no gap and no repeat. When the buffer
        no longer reaches back that far, or this hub never issued that number,
        nothing is replayed and :attr:`Subscription.gap` says why.

        Raises :class:`ValueError` for an unknown topic, a ``maxsize`` below
        1 or an argument of the wrong type (``topics="change"`` is not read as
        its letters), :class:`HubClosedError` once the hub is closed.
        """
        if isinstance(topics, str | bytes):
            raise ValueError(
                f"topics must be a collection of topic names, not a string: [{topics!r}]?"
            )
        if topics is not None and not isinstance(topics, Iterable):
            raise ValueError(f"topics must be a collection of topic names, got {topics!r}")
        try:
            wanted = None if topics is None else frozenset(topics)
        except TypeError:  # an entry that is not a name at all ([["change"]])
            raise ValueError(f"topics must be topic names, got {topics!r:.60}") from None
        if wanted is not None and not wanted <= TOPICS:
            unknown = sorted(map(repr, wanted - TOPICS))
            raise ValueError(f"unknown topics [{', '.join(unknown)}]; choose from {sorted(TOPICS)}")
        if type(maxsize) is not int or not 1 <= maxsize <= sys.maxsize:
            raise ValueError(f"maxsize must be a whole number >= 1, got {maxsize!r}")
        if partition is not None and not isinstance(partition, str):
            raise ValueError(f"partition must be a string or None, got {partition!r}")
        if after is not None and type(after) is not int:
            raise ValueError(f"after must be a whole number or None, got {after!r}")
        if not isinstance(name, str):
            raise ValueError(f"name must be a string, got {name!r}")
        if type(shared) is not bool:
            raise ValueError(f"shared must be True or False, got {shared!r:.40}")
        with self._lock:
            if self._closed:
                raise HubClosedError("the hub is closed")
            sub = Subscription(
                self._unsubscribe,
                id=next(self._ids),
                topics=wanted,
                partition=subscriber_partition(partition),
                maxsize=maxsize,
                name=name,
                keep=self._keep,
                shared=shared,
            )
            sub.position = self._seq
            if after is not None and after != self._seq:
                self._replay_locked(sub, after)
            self._subs[sub.id] = weakref.ref(sub, self._on_freed)
            self._routes.clear()
        return sub

    def _on_freed(self, _ref: _Ref) -> None:
        """A subscription was freed without close(): note it, forget it later.

        Runs wherever the garbage collector does, maybe inside this hub's lock
        on the same thread: so it only raises a flag, taking no lock."""
        self._freed = True

    def _reap_locked(self) -> None:
        """Forget the subscriptions that were freed without being closed."""
        self._freed = False
        dead = [id for id, ref in self._subs.items() if ref() is None]
        for id in dead:
            del self._subs[id]
        if dead:
            self._routes.clear()

    def _live_locked(self) -> list[Subscription]:
        """The open subscriptions, in subscription order (the freed ones forgotten)."""
        self._reap_locked()
        return [sub for ref in self._subs.values() if (sub := ref()) is not None]

    def _replay_locked(self, sub: Subscription, after: int) -> None:
        """Queue the buffered events after ``after`` that ``sub`` takes, or record a gap."""
        if after < 0 or after > self._seq:
            sub.gap = GAP_UNKNOWN
            return
        buffer = self._replay
        oldest = buffer[0].seq if buffer else self._seq + 1
        if after + 1 < oldest:
            sub.gap = GAP_EXPIRED
            return
        for event in itertools.islice(buffer, after + 1 - oldest, None):
            if _takes(sub, _route_key(event)):
                sub._push(event)

    def _route_locked(self, key: _RouteKey) -> _Route:
        route = tuple(weakref.ref(sub) for sub in self._live_locked() if _takes(sub, key))
        self._routes[key] = route
        return route

    def _remove_locked(self, sub: Subscription) -> None:
        if self._subs.pop(sub.id, None) is not None:
            self._routes.clear()

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            self._remove_locked(sub)

    # ------------------------------------------------------------ the store

    def attach(
        self,
        store: Store,
        *,
        lsn_of: Callable[[Change], object | None] | None = None,
        hit_partition: Callable[[Sequence[Item]], str | None] | None = None,
    ) -> None:
        """Publish ``store``'s changes and search hits on this hub.

        Installs the store's change record hook and hit hook (replacing any
        hit hook it had). Changes arrive after commit, outside the store's
        lock, in commit order, never for a private item, a link-only edit or an
        id the store's ``Config.quiet`` names (the store's own rules). A delete
        goes to the removed item's partition (``Change.previous``). An item
        moved to another partition, unshared or made private is withdrawn
        from the subscribers that saw it: a ``delete`` marked ``withdrawn``.

        ``lsn_of(change)``, when given, supplies each change's journal
        position for :attr:`ItemChanged.lsn <memstore_hub.events.ItemChanged.lsn>`
        (it receives the very :class:`~memstore.Change` object a journal's
        before-commit listener saw); if it raises, the error is logged (logger
        ``memstore.hub``) and the change published without one.

        A hit drops ids that are private or no longer stored;
        ``hit_partition(items)`` names the searcher's partition from the items
        that remain (default :func:`~memstore_hub.partition.hit_partition`).
        """
        if not isinstance(store, Store):
            raise ValueError(f"attach takes a memstore.Store, got {store!r:.60}")
        for name, fn in (("lsn_of", lsn_of), ("hit_partition", hit_partition)):
            if fn is not None and not callable(fn):
                raise ValueError(f"{name} must be a function or None, got {fn!r:.60}")
        bridge = StoreBridge(self, store, lsn_of=lsn_of, hit_partition=hit_partition)
        store.set_change_record_hook(bridge.on_change)
        store.set_hit_hook(bridge.on_hit)
        self._bridges[id(store)] = bridge.detach

    def detach(self, store: Store) -> None:
        """Stop publishing ``store``'s events (clears the hooks :meth:`attach` installed)."""
        undo = self._bridges.pop(id(store), None)
        if undo is not None:
            undo()

    # ----------------------------------------------------------- inspection

    @property
    def seq(self) -> int:
        """The sequence number of the last event published (0 before the first)."""
        return self._seq

    def stats(self) -> HubStats:
        """Subscribers, events published, and each subscriber's counters (a snapshot)."""
        with self._lock:
            subs = self._live_locked()
            published = self._seq
            buffered = len(self._replay)
            per = []
            for s in subs:
                received, read, queued, dropped = s._counts()
                per.append(
                    SubscriberStats(
                        id=s.id,
                        name=s.name,
                        partition=s.partition,
                        topics=None if s.topics is None else tuple(sorted(s.topics)),
                        maxsize=s.maxsize,
                        received=received,
                        read=read,
                        queued=queued,
                        dropped=dropped,
                    )
                )
        return HubStats(len(subs), published, buffered, tuple(per))

    # -------------------------------------------------------------- closing

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Stop: detach from every store, publish nothing more, end every subscription.

        Subscribers read what is already queued, then their iteration ends.
        Idempotent.
        """
        for undo in list(self._bridges.values()):
            undo()
        self._bridges.clear()
        with self._lock:
            self._closed = True
            subs = self._live_locked()
            self._subs.clear()
            self._routes.clear()
        for sub in subs:
            sub._end()

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _seen_by(item: Item | None) -> str | None:
    """The audience that sees ``item`` (``None``: no one, for none or a private one)."""
    if item is None or item.scope == SCOPE_PRIVATE:
        return None
    return item_partition(item)


def _route_key(event: Event) -> _RouteKey:
    """What routing an event depends on: its topic, audience and spared audience."""
    return (event.topic, event.partition, event.spared)


def _takes(sub: Subscription, key: _RouteKey) -> bool:
    """Whether ``sub`` receives an event routed by ``key``: live, and when replayed."""
    topic, audience, spared = key
    return (sub.topics is None or topic in sub.topics) and reaches(
        sub.partition, sub.shared, audience, spared
    )
