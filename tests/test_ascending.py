"""``ascending`` is ``sorted``, lazily: every prefix of it is the sorted prefix.

And the walk and ``links_in``, which read a hub's linkers through it, answer
what they answered when they sorted them all: checked on hubs past
``SORT_BELOW`` linkers (some private or retired) against a walk over fully
sorted linkers and a filter over every item.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from itertools import islice

from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import Item, Store, ThoughtLink
from memstore._ascending import SORT_BELOW, ascending
from memstore.graph import spread_within


@settings(max_examples=200, deadline=None)
@given(
    ids=st.sets(st.text(alphabet="abcXYZ019-", max_size=6), max_size=3 * SORT_BELOW),
    take=st.integers(0, 3 * SORT_BELOW + 1),
)
def test_every_prefix_of_ascending_is_the_sorted_prefix(ids: set[str], take: int) -> None:
    whole = sorted(ids)
    assert list(islice(ascending(ids), take)) == whole[:take]
    assert list(ascending(ids)) == whole


def _hub(n: int, seed: int) -> Store:
    """A hub, ``n`` spokes with shuffled ids (every 7th private, every 11th stale) and a
    few second-hop items, some spokes linking twice."""
    import random

    rnd = random.Random(seed)
    store = Store()
    store.upsert(Item(id="hub", kind="note", content="hub"))
    names = [f"{rnd.randrange(10**6):06d}-{k}" for k in range(n)]
    rnd.shuffle(names)
    for k, name in enumerate(names):
        kw: dict[str, object] = {}
        if k % 7 == 0:
            kw = {"scope": "private", "tags": ["user:dana"]}
        elif k % 11 == 0:
            kw = {"status": "stale"}
        links = [ThoughtLink(to_id="hub", relation="explains", weight=rnd.choice([0.5, 1.0]))]
        if k % 5 == 0:
            links.append(ThoughtLink(to_id="hub", relation="caused_by", weight=0.25))
        if k % 13 == 0:
            links.append(ThoughtLink(to_id=f"far-{k}", relation="explains"))
            store.upsert(Item(id=f"far-{k}", kind="note", content="far"))
        store.upsert(Item(id=name, kind="note", content="spoke", links=links, **kw))  # type: ignore[arg-type]
    return store


def _sorted_neighbours(store: Store) -> Callable[[str], Iterable[tuple[str, float]]]:
    """The walk's neighbours as they were: every linker sorted before the first is read."""
    items = {it.id: it for it in store.items()}

    def live(id: str) -> bool:
        it = items.get(id)
        return it is not None and it.scope != "private" and it.status == "active"

    def neighbours(node: str) -> Iterable[tuple[str, float]]:
        for link in items[node].links:
            if live(link.to_id):
                yield link.to_id, link.weight
        for src in sorted(i for i, it in items.items() if any(ln.to_id == node for ln in it.links)):
            if live(src):
                for link in items[src].links:
                    if link.to_id == node:
                        yield src, link.weight

    return neighbours


@settings(max_examples=12, deadline=None)
@given(
    n=st.sampled_from([SORT_BELOW - 1, SORT_BELOW, 3 * SORT_BELOW]),
    seed=st.integers(0, 10**6),
    reach=st.integers(1, 3 * SORT_BELOW),
    depth=st.integers(1, 3),
)
def test_a_bounded_walk_from_a_hub_reads_its_linkers_in_id_order(
    n: int, seed: int, reach: int, depth: int
) -> None:
    store = _hub(n, seed)
    neighbours = _sorted_neighbours(store)
    live = sorted(
        it.id
        for it in store.items()
        if it.id != "hub" and it.scope != "private" and it.status == "active"
    )
    for anchors in (["hub"], [live[3]]):
        want = spread_within(anchors, neighbours, depth, 0.6, reach)
        got, complete = store.traverse_within(anchors, depth, 0.6, reach=reach)
        assert [(s.item.id, s.score) for s in got] == want.ranked
        assert complete == want.complete


@settings(max_examples=12, deadline=None)
@given(
    n=st.sampled_from([SORT_BELOW - 1, 3 * SORT_BELOW]),
    seed=st.integers(0, 10**6),
    limit=st.integers(0, 3 * SORT_BELOW),
)
def test_links_in_keeps_the_first_linkers_by_id_and_counts_every_link(
    n: int, seed: int, limit: int
) -> None:
    store = _hub(n, seed)
    skip = lambda it: it.id.endswith("3")  # noqa: E731
    linkers = sorted(
        it.id
        for it in store.items()
        if it.scope != "private"
        and it.status == "active"
        and any(ln.to_id == "hub" for ln in it.links)
        and not skip(it)
    )
    count = sum(1 for i in linkers for ln in store.get(i).links if ln.to_id == "hub")  # type: ignore[union-attr]
    kept, links = store.links_in("hub", skip=skip, limit=limit)
    assert [it.id for it in kept] == (linkers[:limit] if limit else linkers)
    assert links == count
