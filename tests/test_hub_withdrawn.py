"""An item that leaves a subscriber's sight is withdrawn from its stream.

Moved to another partition, unshared, or made private: a subscriber that saw
the item must stop showing it, so it receives a ``delete`` marked
``withdrawn`` (carrying no item: not even the new partition is told). Those
who gain sight receive the item; those who keep it receive the update. The
reference is the search rule (:func:`memstore.search.default_visible`): after
every change, what each subscriber shows is exactly what it may see.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Change, Item, Memory, Store
from memstore.search import default_visible
from memstore.tags import PARTITION_ALL
from memstore_hub import Event, Hub, ItemChanged, Subscription
from tests.test_hub_partitions import SUBSCRIBER_PARTITIONS, ItemSpec, item_specs

IDS = ("x", "y")


def may_see(p: str | None, shared: bool, spec: ItemSpec | None) -> bool:
    """Whether a subscriber of ``p`` may see an item in state ``spec`` (``None``: absent)."""
    if spec is None or spec.private:
        return False
    if p is None or p == PARTITION_ALL:
        return True
    own = p == "" or (spec.tenant == p and not spec.shared)
    return default_visible(spec.item("x"), p) and (shared or own)


def queued(sub: Subscription) -> list[Event]:
    return list(iter(sub.get_nowait, None))


class View:
    """What a stream's reader shows: the ids whose last event was an upsert."""

    def __init__(self, sub: Subscription) -> None:
        self.sub = sub
        self.shown: set[str] = set()

    def read(self, *, by_upsert: bool) -> set[str]:
        """Apply the queued events; ``by_upsert``: the change was an upsert, not a delete."""
        for ev in queued(self.sub):
            assert isinstance(ev, ItemChanged)
            assert ev.item is None or ev.item.scope != "private"
            if ev.op == "upsert":
                self.shown.add(ev.id)
            else:  # only what it shows, and marked withdrawn exactly when the item lives on
                assert ev.id in self.shown and ev.withdrawn == by_upsert, ev
                self.shown.discard(ev.id)
        return self.shown


@settings(max_examples=300, deadline=None)
@given(
    subs=st.lists(
        st.tuples(st.sampled_from(SUBSCRIBER_PARTITIONS), st.booleans()), min_size=1, max_size=6
    ),
    script=st.lists(st.tuples(st.sampled_from(IDS), st.none() | item_specs), max_size=30),
)
def test_every_subscriber_shows_exactly_what_it_may_see_after_every_change(
    subs: list[tuple[str | None, bool]], script: list[tuple[str, ItemSpec | None]]
) -> None:
    """``None`` in the script deletes the id; a spec writes it in that state."""
    hub = Hub()
    views = [View(hub.subscribe(partition=p, shared=sh, topics={"change"})) for p, sh in subs]
    state: dict[str, ItemSpec] = {}
    for id, spec in script:
        old = state.get(id)
        previous = old.item(id) if old is not None else None
        if spec is None:
            if old is None:
                continue
            hub.publish_change("delete", None, id, "note", previous=previous)
            del state[id]
        else:
            hub.publish_change("upsert", spec.item(id), previous=previous)
            state[id] = spec
        for view, (p, shared) in zip(views, subs, strict=True):
            want = {i for i in IDS if may_see(p, shared, state.get(i))}
            assert view.read(by_upsert=spec is not None) == want, (p, shared)


def test_a_move_withdraws_the_item_from_the_partition_it_left() -> None:
    store = Store()
    hub = Hub()
    hub.attach(store)
    alpha, beta, every = (hub.subscribe(partition=p) for p in ("alpha", "beta", None))
    store.upsert(Item(id="n", kind="note", title="a note", tags=["tenant/alpha"]))
    assert [(e.op, e.withdrawn) for e in queued(alpha)] == [("upsert", False)]  # type: ignore[attr-defined]
    queued(every)

    store.upsert(Item(id="n", kind="note", title="a note", tags=["tenant/beta"]))
    (gone,) = queued(alpha)
    assert isinstance(gone, ItemChanged)
    assert (gone.op, gone.id, gone.kind, gone.item, gone.withdrawn) == (
        "delete",
        "n",
        "note",
        None,
        True,
    )
    assert gone.payload()["withdrawn"] is True and gone.payload()["item"] is None
    (came,) = queued(beta)
    assert isinstance(came, ItemChanged) and came.op == "upsert" and not came.withdrawn
    assert "withdrawn" not in came.payload()
    (updated,) = queued(every)  # it saw the item before and after: an update only
    assert isinstance(updated, ItemChanged) and updated.op == "upsert"


def test_an_item_made_private_is_withdrawn_and_reaches_the_record_hook() -> None:
    store = Store()
    records: list[Change] = []
    store.set_change_record_hook(records.append)
    store.upsert(Item(id="n", kind="note", title="a note", tags=["tenant/alpha"]))
    store.upsert(Item(id="secret", kind="note", title="mine", scope="private", tags=["user:u"]))
    store.upsert(Item(id="n", kind="note", title="a note", scope="private", tags=["user:u"]))
    store.upsert(Item(id="n", kind="note", title="still mine", scope="private", tags=["user:u"]))
    # The private creation and the private edit are no one's business; making a
    # public item private is: the stream must withdraw it.
    assert [(c.op, c.id, c.item is not None and c.item.scope) for c in records] == [
        ("upsert", "n", "public"),
        ("upsert", "n", "private"),
    ]
    assert records[1].previous is not None and records[1].previous.scope == "public"
    assert not records[1].published  # the change hook and Config.published still skip it


def test_memory_subscribers_see_an_item_withdrawn_when_made_private() -> None:
    def note(scope: str, *tags: str) -> Item:
        return Item(id="n", kind="note", title="a note", scope=scope, tags=list(tags))

    with Memory(embedder=None, hub=True) as mem:
        alpha, beta = mem.subscribe(partition="alpha"), mem.subscribe(partition="beta")
        every = mem.subscribe()
        mem.add(note("public", "tenant/alpha"))
        mem.add(note("private", "tenant/alpha", "user:u1"), dedup=False)
        for sub in (alpha, every):
            got = [(e.op, e.id, e.withdrawn) for e in queued(sub)]  # type: ignore[attr-defined]
            assert got == [("upsert", "n", False), ("delete", "n", True)]
        assert queued(beta) == []
        mem.add(note("public", "tenant/beta"), dedup=False)  # public again, in beta
        assert [(e.op, e.id) for e in queued(beta)] == [("upsert", "n")]  # type: ignore[attr-defined]
        assert queued(alpha) == []


def test_a_resumed_subscriber_gets_the_withdrawal_it_missed_and_no_other() -> None:
    """The replay routes as live delivery does: the withdrawal spares who still sees it."""
    hub = Hub()
    start = hub.seq
    hub.publish_change("upsert", ItemSpec("a", True, False).item("x"))  # shared: everyone
    was = ItemSpec("a", True, False).item("x")
    hub.publish_change("upsert", ItemSpec("a", False, False).item("x"), previous=was)  # unshared
    a = hub.subscribe(partition="a", after=start)
    b = hub.subscribe(partition="b", after=start)
    every = hub.subscribe(after=start)
    assert [(e.op, e.withdrawn) for e in queued(a)] == [("upsert", False), ("upsert", False)]  # type: ignore[attr-defined]
    assert [(e.op, e.withdrawn) for e in queued(b)] == [("upsert", False), ("delete", True)]  # type: ignore[attr-defined]
    assert [(e.op, e.withdrawn) for e in queued(every)] == [("upsert", False), ("upsert", False)]  # type: ignore[attr-defined]
