"""A graph walk for one tenant passes through that tenant's items only.

``Store.traverse_within(..., through=...)`` is what the MemoryProtocol's graph
recall, the MCP ``related`` tool and the inspector's Related panel walk: the
answer must be the walk of a store holding only the caller's items (what
other partitions link neither lifts a score nor stops the walk), and a hub
linked from many other partitions' items must cost the bound, not its links.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store
from memstore.errors import InvalidItemError
from memstore.item import ThoughtLink
from memstore.limits import SKIPPED_READS
from memstore.tags import partition_from_tags

IDS = [f"n{i}" for i in range(10)]
PARTS = ["tenant/a", "tenant/b"]


def _theirs(item: Item) -> bool:
    return partition_from_tags(item.tags) == "a"


def _link(to: str, weight: float = 1.0) -> ThoughtLink:
    return ThoughtLink(to_id=to, relation="explains", weight=weight)


graphs = st.lists(
    st.tuples(
        st.sampled_from(IDS),
        st.sampled_from(PARTS),
        st.lists(st.tuples(st.sampled_from(IDS), st.sampled_from([0.3, 0.7, 1.0])), max_size=3),
    ),
    min_size=1,
    max_size=10,
    unique_by=lambda node: node[0],
)


@settings(max_examples=150, deadline=None)
@given(graphs, st.lists(st.sampled_from(IDS), min_size=1, max_size=3), st.sampled_from([0, 3]))
def test_the_walk_is_the_walk_of_the_tenants_items_alone(
    nodes: list[tuple[str, str, list[tuple[str, float]]]], anchors: list[str], reach: int
) -> None:
    items = [
        Item(
            id=id,
            kind="note",
            title=id,
            tags=[part],
            links=[_link(to, w) for to, w in dict(links).items() if to != id],
        )
        for id, part, links in nodes
    ]
    whole, alone = Store(), Store()
    whole.restore(items)
    alone.restore([it for it in items if _theirs(it)])
    found, complete = whole.traverse_within(anchors, 3, 0.5, reach=reach, through=_theirs)
    want, want_complete = alone.traverse_within(anchors, 3, 0.5, reach=reach)
    got = [(s.item.id, s.score) for s in found]
    assert all(_theirs(s.item) for s in found)
    if complete and want_complete:
        assert got == [(s.item.id, s.score) for s in want]
    else:  # only a bounded walk stops, and never past its reach
        assert reach and len(got) <= reach


def test_other_partitions_neither_lift_a_score_nor_stop_the_walk() -> None:
    store = Store()
    store.upsert(Item(id="a1", kind="note", title="mine", tags=["tenant/a"]))
    store.upsert(Item(id="a2", kind="note", title="mine too", tags=["tenant/a"]))
    bridge = [_link("a1"), _link("a2")]  # tenant b links a1 and a2
    store.upsert(Item(id="b-bridge", kind="note", title="theirs", tags=["tenant/b"], links=bridge))
    found, complete = store.traverse_within(["a1"], 3, 0.5, reach=5, through=_theirs)
    assert found == [] and complete  # a2 is reached only through b's item
    without, _ = store.traverse_within(["a1"], 3, 0.5, reach=5)
    assert [s.item.id for s in without] == ["b-bridge", "a2"]  # the walk without ``through``


def test_a_hub_linked_from_many_other_partitions_costs_the_bound() -> None:
    store = Store()
    store.upsert(Item(id="hub", kind="note", title="hub", tags=["tenant/a"]))
    store.upsert_many(
        [
            Item(
                id=f"b{n:05}", kind="note", title="theirs", tags=["tenant/b"], links=[_link("hub")]
            )
            for n in range(5_000)
        ]
    )
    # after every b item in id order
    store.upsert(
        Item(id="z-mine", kind="note", title="mine", tags=["tenant/a"], links=[_link("hub")])
    )
    asked = 0

    def counted(item: Item) -> bool:
        nonlocal asked
        asked += 1
        return _theirs(item)

    reach = 10
    found, complete = store.traverse_within(["hub"], 3, 0.5, reach=reach, through=counted)
    assert not complete and found == []  # stopped among b's linkers, and says so
    assert asked <= SKIPPED_READS * reach + 2  # the anchor, and the one past the bound
    found, complete = store.traverse_within(["hub"], 3, 0.5, reach=0, through=_theirs)
    assert [s.item.id for s in found] == ["z-mine"] and complete  # unbounded: every read


def test_through_must_be_a_function() -> None:
    with pytest.raises(InvalidItemError, match="through must be a function"):
        Store().traverse_within(["x"], through="tenant/a")  # type: ignore[arg-type]
