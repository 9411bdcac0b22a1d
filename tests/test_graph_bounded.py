"""Spreading activation with a bound on the items it reaches: the whole walk's answer, or a flag.

``spread_within`` (and ``Store.traverse_within`` over it) stops once the walk
would reach more than ``reach`` nodes, so a click on a hub does not cost its
whole neighbourhood. The differential tests compare it, on random graphs,
with the unbounded walk and with a brute force over every path: under the
bound the answer is identical; past it the flag says so (never a false
alarm), and what it answers is a part of the whole answer, each score a real
path's, at most the node's best.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstore import InvalidItemError, Item, Store, ThoughtLink
from memstore.graph import MAX_DEPTH, spread, spread_within

NODES = [f"n{i}" for i in range(8)]
WEIGHTS = [0.25, 0.5, 1.0]

Edges = dict[str, list[tuple[str, float]]]

edge_lists = st.lists(
    st.tuples(st.sampled_from(NODES), st.sampled_from(NODES), st.sampled_from(WEIGHTS)),
    max_size=24,
)


def _graph(edges: list[tuple[str, str, float]]) -> Edges:
    """Both directions of every edge (a link is an association), self-loops dropped."""
    out: Edges = {}
    for a, b, w in edges:
        if a != b:
            out.setdefault(a, []).append((b, w))
            out.setdefault(b, []).append((a, w))
    return out


def _brute(graph: Edges, anchors: list[str], depth: int, decay: float) -> dict[str, float]:
    """Every walk of at most ``depth`` hops from an anchor, each node's best product."""
    best: dict[str, float] = {}

    def walk(node: str, score: float, hops: int) -> None:
        if hops == depth:
            return
        for other, weight in graph.get(node, ()):
            s = score * decay * weight
            if s > best.get(other, 0.0):
                best[other] = s
            walk(other, s, hops + 1)

    for a in dict.fromkeys(anchors):
        walk(a, 1.0, 0)
    return {n: s for n, s in best.items() if n not in anchors}


def _lookup(graph: Edges) -> Callable[[str], Iterable[tuple[str, float]]]:
    return lambda node: iter(graph.get(node, ()))


@settings(max_examples=400, deadline=None)
@given(
    edges=edge_lists,
    anchors=st.lists(st.sampled_from(NODES), min_size=1, max_size=3),
    depth=st.integers(1, 4),
    decay=st.sampled_from([0.5, 0.6, 1.0]),
    reach=st.integers(0, 9),
)
def test_a_bounded_walk_is_the_whole_walk_or_says_it_is_not(
    edges: list[tuple[str, str, float]], anchors: list[str], depth: int, decay: float, reach: int
) -> None:
    graph = _graph(edges)
    whole = spread(anchors, _lookup(graph), depth, decay)
    assert dict(whole) == _brute(graph, anchors, depth, decay)
    got = spread_within(anchors, _lookup(graph), depth, decay, reach)
    if reach == 0 or len(whole) <= reach:
        assert got.complete and got.ranked == whole
        return
    assert not got.complete  # more than ``reach`` nodes in the whole walk: flagged, always
    assert len(got.ranked) == reach
    full = dict(whole)
    for node, score in got.ranked:
        assert 0.0 < score <= full[node], node
    assert got.ranked == sorted(got.ranked, key=lambda p: (-p[1], p[0]))


def test_a_hub_is_read_only_until_the_bound() -> None:
    # The lazy neighbours of a hub of 10,000: the walk stops after reach + 1 of them.
    read = 0

    def neighbours(node: str) -> Iterable[tuple[str, float]]:
        nonlocal read
        if node != "hub":
            return
        for n in range(10_000):
            read += 1
            yield f"s{n:05d}", 1.0

    got = spread_within(["hub"], neighbours, MAX_DEPTH, 0.5, 100)
    assert not got.complete and len(got.ranked) == 100 and read == 101


def _store(
    nodes: list[tuple[str, str, list[tuple[str, float]]]], subjects: dict[str, str] | None = None
) -> Store:
    store = Store()
    for id, how, links in nodes:
        kw: dict[str, object] = {"subject": (subjects or {}).get(id, "")}
        if how == "private":
            kw["scope"] = "private"
            kw["tags"] = ["user:dana"]
        elif how == "retired":
            kw["status"] = "stale"
        store.upsert(
            Item(
                id=id,
                kind="note",
                content=f"note {id}",
                links=[ThoughtLink(to_id=t, relation="explains", weight=w) for t, w in links],
                **kw,  # type: ignore[arg-type]
            )
        )
    return store


store_nodes = st.lists(
    st.tuples(
        st.sampled_from(NODES),
        st.sampled_from(["shared", "shared", "shared", "private", "retired"]),
        st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(WEIGHTS)), max_size=3),
    ),
    max_size=8,
    unique_by=lambda n: n[0],
)


@settings(max_examples=150, deadline=None)
@given(
    nodes=store_nodes,
    anchors=st.lists(st.sampled_from(NODES), min_size=1, max_size=2),
    depth=st.integers(1, 3),
    reach=st.integers(0, 8),
)
def test_the_store_walk_within_a_bound_equals_the_whole_walk_under_it(
    nodes: list[tuple[str, str, list[tuple[str, float]]]],
    anchors: list[str],
    depth: int,
    reach: int,
) -> None:
    nodes = [(id, how, [(t, w) for t, w in links if t != id]) for id, how, links in nodes]
    store = _store(nodes)
    whole = [(s.item.id, s.score) for s in store.traverse_scored(anchors, depth, 0.6)]
    found, complete = store.traverse_within(anchors, depth, 0.6, reach=reach)
    got = [(s.item.id, s.score) for s in found]
    assert all(s.item.scope != "private" for s in found)
    if reach == 0 or len(whole) <= reach:
        assert complete and got == whole
    else:
        assert not complete and len(got) == reach
        full = dict(whole)
        assert all(score <= full[id] for id, score in got)


@pytest.mark.parametrize(
    ("bad", "error"),
    [(-1, "reach must be at least 0, got -1"), ("5", "reach must be a whole number"), (True, "")],
)
def test_a_reach_that_is_not_a_count_is_refused(bad: object, error: str) -> None:
    store = Store()
    store.upsert(Item(id="a", kind="note", content="a"))
    with pytest.raises(InvalidItemError, match=error or "whole number"):
        store.traverse_within(["a"], reach=bad)  # type: ignore[arg-type]


# ------------------------------------------------ context: the anchors too


def _subject_store(nodes: list[tuple[str, str, str, list[tuple[str, float]]]]) -> Store:
    """``_store``, each item with a subject (so an anchor text may name several)."""
    return _store(
        [(id, how, links) for id, how, _, links in nodes], {id: sub for id, _, sub, _ in nodes}
    )


subject_nodes = st.lists(
    st.tuples(
        st.sampled_from(NODES),
        st.sampled_from(["shared", "shared", "shared", "private", "retired"]),
        st.sampled_from(["topic red", "topic blue", "other"]),
        st.lists(st.tuples(st.sampled_from(NODES), st.sampled_from(WEIGHTS)), max_size=3),
    ),
    max_size=8,
    unique_by=lambda n: n[0],
)


@settings(max_examples=200, deadline=None)
@given(
    nodes=subject_nodes,
    anchor=st.sampled_from([*NODES[:3], "N1", "topic", "topic red", "other", "nothing"]),
    depth=st.integers(1, 3),
    reach=st.integers(0, 8),
)
def test_context_within_a_bound_is_the_unbounded_context_or_says_it_is_not(
    nodes: list[tuple[str, str, str, list[tuple[str, float]]]],
    anchor: str,
    depth: int,
    reach: int,
) -> None:
    nodes = [(id, how, sub, [(t, w) for t, w in links if t != id]) for id, how, sub, links in nodes]
    store = _subject_store(nodes)
    whole = store.context_within(anchor, depth, reach=0)
    assert whole.complete
    assert (whole.anchors, whole.related) == store.context(anchor, depth, reach=0)
    # The unbounded context is the walk from its anchors (itself checked against a brute force).
    ids = [it.id for it in whole.anchors]
    assert whole.related == store.traverse_scored(ids, depth, 0.6)
    got = store.context_within(anchor, depth, reach=reach)
    assert (got.anchors, got.related) == store.context(anchor, depth, reach=reach)
    if reach == 0 or (len(whole.anchors) <= reach and len(whole.related) <= reach):
        assert got == whole
        return
    assert not got.complete  # more named or reached than the bound: flagged, always
    assert got.anchors == whole.anchors[:reach]
    assert len(got.related) <= reach
    full = {s.item.id: s.score for s in whole.related}
    for s in got.related:  # a part of the answer; an anchor left out may be reached instead
        assert s.item.id in ids or 0.0 < s.score <= full[s.item.id]


def test_memory_context_stops_at_the_default_reach_and_context_within_says_so() -> None:
    from memstore import Memory
    from memstore.limits import CONTEXT_REACH

    with Memory(embedder=None) as mem:
        mem.add(Item(id="hub", kind="note", content="hub"))
        mem.add_many(
            [
                Item(
                    id=f"s{n:05d}",
                    kind="note",
                    content="spoke",
                    links=[ThoughtLink(to_id="hub", relation="explains")],
                )
                for n in range(CONTEXT_REACH + 5)
            ]
        )
        anchors, related = mem.context("hub")
        assert [a.id for a in anchors] == ["hub"] and len(related) == CONTEXT_REACH
        cut = mem.context_within("hub")
        assert not cut.complete and cut.related == related
        whole = mem.context_within("hub", reach=0)
        assert whole.complete and len(whole.related) == CONTEXT_REACH + 5
        assert whole.related[:CONTEXT_REACH] == related  # every spoke scores the same: by id
        small = mem.context_within("s00003", 2)  # the hub, then every spoke: cut at the bound
        assert not small.complete and len(small.related) == CONTEXT_REACH
        near = mem.context_within("s00003", 1)
        assert near.complete and [s.item.id for s in near.related] == ["hub"]


@pytest.mark.parametrize("bad", [-1, "5", True, 2.0])
def test_a_context_reach_that_is_not_a_count_is_refused(bad: object) -> None:
    from memstore import Memory

    with Memory(embedder=None) as mem:
        mem.add(Item(id="a", kind="note", content="a"))
        with pytest.raises(InvalidItemError, match="reach"):
            mem.context("a", reach=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidItemError, match="reach"):
            mem.context_within("a", reach=bad)  # type: ignore[arg-type]


@settings(max_examples=150, deadline=None)
@given(
    nodes=store_nodes,
    anchors=st.lists(st.sampled_from(NODES), min_size=1, max_size=2),
    depth=st.integers(1, 3),
    reach=st.integers(0, 8),
    wanted=st.sets(st.sampled_from(NODES)),
    limit=st.integers(0, 9),
)
def test_keep_and_limit_copy_only_the_first_kept_of_the_same_walk(
    nodes: list[tuple[str, str, list[tuple[str, float]]]],
    anchors: list[str],
    depth: int,
    reach: int,
    wanted: set[str],
    limit: int,
) -> None:
    nodes = [(id, how, [(t, w) for t, w in links if t != id]) for id, how, links in nodes]
    store = _store(nodes)
    found, complete = store.traverse_within(anchors, depth, 0.6, reach=reach)
    want = [(s.item.id, s.score) for s in found if s.item.id in wanted]
    got, got_complete = store.traverse_within(
        anchors, depth, 0.6, reach=reach, keep=lambda it: it.id in wanted, limit=limit
    )
    assert [(s.item.id, s.score) for s in got] == (want[:limit] if limit else want)
    assert got_complete == complete


@pytest.mark.parametrize(
    ("kw", "error"),
    [({"keep": "yes"}, "keep must be a function"), ({"limit": -1}, "limit must be at least 0")],
)
def test_a_keep_or_limit_of_the_wrong_kind_is_refused(kw: dict[str, object], error: str) -> None:
    store = Store()
    store.upsert(Item(id="a", kind="note", content="a"))
    with pytest.raises(InvalidItemError, match=error):
        store.traverse_within(["a"], **kw)  # type: ignore[arg-type]


def test_a_limit_past_any_index_is_no_limit() -> None:
    """islice refused a stop past sys.maxsize: a ValueError of its own words, no answer."""
    store = Store()
    store.upsert(Item(id="hub", kind="note", content="hub"))
    store.upsert(
        Item(
            id="s", kind="note", content="s", links=[ThoughtLink(to_id="hub", relation="explains")]
        )
    )
    found, complete = store.traverse_within(["hub"], limit=10**30, reach=10**30)
    assert [s.item.id for s in found] == ["s"] and complete


def test_async_memory_context_within_is_memorys() -> None:
    import anyio

    from memstore import AsyncMemory, Memory

    async def main() -> None:
        with Memory(embedder=None) as mem:
            mem.add(Item(id="hub", kind="note", content="hub"))
            for n in range(3):
                mem.add(
                    Item(
                        id=f"s{n}",
                        kind="note",
                        content="spoke",
                        links=[ThoughtLink(to_id="hub", relation="explains")],
                    )
                )
            amem = AsyncMemory(memory=mem)
            got = await amem.context_within("hub", reach=2)
            assert got == mem.context_within("hub", reach=2) and not got.complete
            assert await amem.context("hub", reach=0) == mem.context("hub", reach=0)

    anyio.run(main)
