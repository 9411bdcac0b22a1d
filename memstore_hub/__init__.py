"""memstore_hub: the change hub that streams memory events to subscribers.

A :class:`Hub` publishes typed events (an item change, a search hit, a
metrics snapshot) to subscriptions that are blocking iterators for threads and
async iterators for asyncio. Each subscriber has a bounded queue: one that
falls behind loses its oldest events and is told how many, and never slows a
writer. :mod:`memstore_hub.sse` turns the events into a resumable
Server-Sent Events stream.

>>> from memstore import Item, Store
>>> from memstore_hub import Hub
>>> store, hub = Store(), Hub()
>>> hub.attach(store)
>>> sub = hub.subscribe(partition="alpha")
>>> _ = store.upsert(Item(id="n1", kind="note", title="ledger pool", tags=["tenant/alpha"]))
>>> _ = store.upsert(Item(id="n2", kind="note", title="tax filing", tags=["tenant/beta"]))
>>> event = sub.get(timeout=1)
>>> event.op, event.id, event.partition, event.seq
('upsert', 'n1', 'alpha', 1)
>>> sub.get_nowait() is None
True
"""

from memstore_hub.events import (
    TOPIC_CHANGE,
    TOPIC_HIT,
    TOPIC_METRICS,
    TOPICS,
    Event,
    ItemChanged,
    MetricsSnapshot,
    SearchHit,
)
from memstore_hub.hub import (
    DEFAULT_MAXSIZE,
    DEFAULT_REPLAY,
    Hub,
    HubClosedError,
    HubStats,
    SubscriberStats,
)
from memstore_hub.partition import EVERY_PARTITION
from memstore_hub.subscription import GAP_EXPIRED, GAP_UNKNOWN, Subscription

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAXSIZE",
    "DEFAULT_REPLAY",
    "EVERY_PARTITION",
    "GAP_EXPIRED",
    "GAP_UNKNOWN",
    "TOPICS",
    "TOPIC_CHANGE",
    "TOPIC_HIT",
    "TOPIC_METRICS",
    "Event",
    "Hub",
    "HubClosedError",
    "HubStats",
    "ItemChanged",
    "MetricsSnapshot",
    "SearchHit",
    "SubscriberStats",
    "Subscription",
    "__version__",
]
