"""Partition isolation of the hub, as properties over random events and subscribers.

The reference for item events is the search rule itself,
:func:`memstore.search.default_visible`: a subscriber of partition ``p``
receives a change exactly when a search in ``p`` could return the item. Hits
and metrics name their audience directly. Whatever the mix, every subscriber
receives exactly its events, in publication order, and never a private item.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item
from memstore.search import default_visible
from memstore.tags import PARTITION_ALL
from memstore_hub import TOPIC_CHANGE, TOPIC_HIT, TOPIC_METRICS, Event, Hub, ItemChanged
from memstore_hub.partition import item_partition, receives, subscriber_partition

TENANTS = ("a", "b", "")
SUBSCRIBER_PARTITIONS = ("a", "b", "c", "", PARTITION_ALL, None)
AUDIENCES = ("a", "b", "", None)


@dataclass(frozen=True)
class ItemSpec:
    tenant: str
    shared: bool
    private: bool

    def item(self, id: str) -> Item:
        tags = [f"tenant/{self.tenant}"] if self.tenant else []
        if self.shared:
            tags.append("shared")
        if self.private:
            tags.append("user:u1")
        return Item(
            id=id, kind="note", title=id, tags=tags, scope="private" if self.private else "public"
        )


item_specs = st.builds(ItemSpec, st.sampled_from(TENANTS), st.booleans(), st.booleans())


@dataclass(frozen=True)
class Op:
    kind: str  # "upsert", "delete", "delete-unknown", "hit", "metrics"
    spec: ItemSpec
    audience: str | None


ops = st.builds(
    Op,
    st.sampled_from(("upsert", "delete", "delete-unknown", "hit", "metrics")),
    item_specs,
    st.sampled_from(AUDIENCES),
)
subscribers = st.tuples(
    st.sampled_from(SUBSCRIBER_PARTITIONS),
    st.none() | st.sets(st.sampled_from((TOPIC_CHANGE, TOPIC_HIT, TOPIC_METRICS)), min_size=1),
    st.booleans(),  # shared: also what every partition sees
)


def _sees_everything(p: str | None) -> bool:
    return p is None or p == PARTITION_ALL


def _model_receives(p: str | None, op: Op, item: Item, shared: bool) -> bool:
    """The reference rule, written from the search rule and the event docs.

    ``shared=False``: a partition's subscriber keeps to the partition's own
    items (tagged with it and not ``shared``) and events addressed to it.
    """
    if _sees_everything(p):
        return True
    if op.kind in ("upsert", "delete"):
        own = p == "" or (op.spec.tenant == p and not op.spec.shared)
        return default_visible(item, p or "") and (shared or own)
    if op.kind == "delete-unknown" or op.audience is None:
        return False
    return op.audience == p or (shared and op.audience == "")


@settings(max_examples=300, deadline=None)
@given(
    subs=st.lists(subscribers, min_size=1, max_size=6),
    script=st.lists(ops, max_size=40),
)
def test_every_subscriber_gets_exactly_its_partitions_events_in_order(
    subs: list[tuple[str | None, set[str] | None, bool]], script: list[Op]
) -> None:
    hub = Hub()
    subscriptions = [hub.subscribe(partition=p, topics=t, shared=sh) for p, t, sh in subs]
    expected: list[list[Event]] = [[] for _ in subs]
    for n, op in enumerate(script):
        item = op.spec.item(f"i{n}")
        ev: Event | None
        if op.kind == "upsert":
            ev = hub.publish_change("upsert", item)
        elif op.kind == "delete":
            ev = hub.publish_change("delete", None, item.id, item.kind, previous=item)
        elif op.kind == "delete-unknown":
            ev = hub.publish_change("delete", None, item.id, item.kind)
        elif op.kind == "hit":
            ev = hub.publish_hit([item.id], "q", partition=op.audience)
        else:
            ev = hub.publish_metrics({"n": n}, partition=op.audience)
        if op.kind in ("upsert", "delete") and op.spec.private:
            assert ev is None  # never published
            continue
        assert ev is not None
        for k, (p, topics, shared) in enumerate(subs):
            if (topics is None or ev.topic in topics) and _model_receives(p, op, item, shared):
                expected[k].append(ev)

    for sub, want in zip(subscriptions, expected, strict=True):
        got = []
        while (ev := sub.get_nowait()) is not None:
            got.append(ev)
        assert got == want
        for ev in got:
            assert not (isinstance(ev, ItemChanged) and ev.item and ev.item.scope == "private")


@settings(max_examples=300, deadline=None)
@given(spec=item_specs, p=st.sampled_from(SUBSCRIBER_PARTITIONS))
def test_the_routing_rule_is_the_search_visibility_rule(spec: ItemSpec, p: str | None) -> None:
    """For the items a hub publishes: private ones never are, and search hides them too."""
    item = ItemSpec(spec.tenant, spec.shared, private=False).item("x")
    routed = receives(subscriber_partition(p), item_partition(item))
    assert routed == (_sees_everything(p) or default_visible(item, p or ""))


def test_a_subscriber_may_keep_to_its_partitions_own_items() -> None:
    """``shared=False``: none of what every partition sees (untagged or shared items)."""
    hub = Hub()
    own = hub.subscribe(partition="a", shared=False)
    every = hub.subscribe(partition="a")
    for spec in (
        ItemSpec("", False, False),
        ItemSpec("b", True, False),
        ItemSpec("a", False, False),
    ):
        hub.publish_change("upsert", spec.item(f"{spec.tenant or 'none'}-{spec.shared}"))
    hub.publish_hit(["x"], "for everyone", partition="")
    assert [e.partition for e in iter(own.get_nowait, None)] == ["a"]
    assert [e.partition for e in iter(every.get_nowait, None)] == ["", "", "a", ""]
    with pytest.raises(ValueError, match="shared"):
        hub.subscribe(partition="a", shared="no")  # type: ignore[arg-type]
