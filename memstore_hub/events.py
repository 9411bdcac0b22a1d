"""The events a hub carries: an item change, a search hit, a metrics snapshot.

Each event class names its topic (what a subscriber filters on and what an SSE
stream writes as ``event:``). Events are frozen and shared: every subscriber
that receives one gets the same object, so never mutate an event or the item
it carries. The hub stamps :attr:`Event.seq` when it publishes.

>>> hit = SearchHit(item_ids=("n1",), query="ledger pool", partition="alpha")
>>> hit.topic, hit.seq, hit.payload()["item_ids"]
('hit', 0, ['n1'])
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from memstore.item import Item

__all__ = [
    "TOPICS",
    "TOPIC_CHANGE",
    "TOPIC_HIT",
    "TOPIC_METRICS",
    "Event",
    "ItemChanged",
    "MetricsSnapshot",
    "SearchHit",
]

TOPIC_CHANGE = "change"
"""Topic of :class:`ItemChanged`."""
TOPIC_HIT = "hit"
"""Topic of :class:`SearchHit`."""
TOPIC_METRICS = "metrics"
"""Topic of :class:`MetricsSnapshot`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """What every event carries: its place in the hub's order and its audience."""

    topic: ClassVar[str] = ""
    """The topic subscribers filter on (set by each event class)."""

    seq: int = 0
    """The hub's sequence number, stamped at publication: 1, 2, 3... in publication
    order across all topics and partitions (0 until published). An SSE stream
    uses it, with the hub's epoch, as the ``id:`` a client resumes from."""
    partition: str | None = ""
    """Which subscribers receive it: those of this partition (a ``tenant/`` name);
    ``""`` for every partition (an untagged or ``shared`` item); ``None`` for
    subscribers to every partition only (the audience is not known, or the
    event is for operators)."""
    dropped: int = 0
    """How many events this subscriber lost, oldest first, just before this one
    because its queue was full. Set on the copy delivered to that subscriber."""
    spared: str | None = dataclasses.field(default=None, init=False, repr=False, compare=False)
    """An audience this event does not reach although :attr:`partition` covers it
    (set by the hub; ``None``: none). A withdrawal spares those who still see
    the item; see :func:`~memstore_hub.partition.reaches`. Never in the payload."""

    def payload(self) -> dict[str, Any]:
        """The event as a JSON-ready dict (what an SSE ``data:`` line carries)."""
        out: dict[str, Any] = {"seq": self.seq, "partition": self.partition}
        if self.dropped:
            out["dropped"] = self.dropped
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class ItemChanged(Event):
    """An item was written (``upsert``) or removed (``delete``), or left sight.

    Never published for a private item. ``item`` is the stored item for an
    upsert and ``None`` for a delete. A ``delete`` with :attr:`withdrawn` set
    tells a subscriber that the item still exists but is no longer its to
    see: it was moved to another partition, unshared, or made private. The
    subscriber drops it as for a delete; those who gain sight of it get an
    ``upsert`` instead, and those who see it before and after just the update.
    """

    topic: ClassVar[str] = TOPIC_CHANGE

    op: Literal["upsert", "delete"]
    """``"upsert"`` or ``"delete"``."""
    id: str
    """The item's id."""
    kind: str
    """The item's kind (for a delete, the removed item's)."""
    item: Item | None = None
    """The stored item (upsert), ``None`` (delete). Shared: do not mutate."""
    lsn: object | None = None
    """Where the change sits in a durable journal, when one supplies it (see
    ``Hub.attach(lsn_of=...)``); ``None`` otherwise. Any JSON-encodable value
    (a journal's ``Lsn`` tuple, for instance)."""
    withdrawn: bool = False
    """A ``delete`` of an item that still exists, sent to the subscribers that
    saw it and may see it no more (where it went is not said). In the payload
    as ``"withdrawn": true``, only when set."""

    def payload(self) -> dict[str, Any]:
        out = Event.payload(self)
        out["op"] = self.op
        out["id"] = self.id
        out["kind"] = self.kind
        out["lsn"] = self.lsn
        out["item"] = None if self.item is None else self.item.model_dump(mode="json")
        if self.withdrawn:
            out["withdrawn"] = True
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit(Event):
    """A search surfaced these items to a consumer (the store's hit hook)."""

    topic: ClassVar[str] = TOPIC_HIT

    item_ids: tuple[str, ...]
    """The ids the consumer actually used, in result order."""
    query: str
    """The search string."""
    kind: str = ""
    """The kind filter the search applied (``""``: none)."""
    kinds: tuple[str, ...] | None = None
    """Each item's own kind, parallel to ``item_ids``, or ``None``."""

    def payload(self) -> dict[str, Any]:
        out = Event.payload(self)
        out["item_ids"] = list(self.item_ids)
        out["query"] = self.query
        out["kind"] = self.kind
        out["kinds"] = None if self.kinds is None else list(self.kinds)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MetricsSnapshot(Event):
    """Named measurements at one moment, e.g. a searcher's counters.

    Metrics describe the whole engine, so by default only subscribers to every
    partition receive them (``partition=None``).
    """

    topic: ClassVar[str] = TOPIC_METRICS

    partition: str | None = None
    values: Mapping[str, float] = dataclasses.field(default_factory=dict)
    """Measurement name to value (``{"search.total": 12, ...}``)."""

    def payload(self) -> dict[str, Any]:
        out = Event.payload(self)
        out["values"] = dict(self.values)
        return out


TOPICS: frozenset[str] = frozenset(cls.topic for cls in (ItemChanged, SearchHit, MetricsSnapshot))
"""Every topic a subscription may ask for."""
